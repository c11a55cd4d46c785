#!/usr/bin/env bash
# The aiokafka-lite command (docs/guides/cli.md), against the broker at $BOOTSTRAP
# (`aiokafka-lite broker` prints it). Every command has --help.
set -euo pipefail
B="-b ${BOOTSTRAP:-127.0.0.1:9092}"

aiokafka-lite topics create orders --partitions 3 $B
aiokafka-lite topics describe orders $B
aiokafka-lite topics alter-config orders --set retention.ms=86400000 $B
printf 'k1:hello\nk2:world\n' | aiokafka-lite produce orders --key-sep : --compression zstd $B
aiokafka-lite consume orders --from-beginning --max 2 --group readers --format '{partition} {offset} {key} {value}' $B
aiokafka-lite groups describe readers $B        # members, committed offsets, lag
aiokafka-lite groups reset-offsets readers --to-earliest --topic orders $B    # a dry run: add --execute
aiokafka-lite bench produce --records 2000 --size 100 $B
