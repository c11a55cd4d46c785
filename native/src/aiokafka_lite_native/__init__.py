"""Compiled speedups for aiokafka_lite (optional): ``_v2``, the v2 record decoding loop.

aiokafka_lite uses them when this package is installed and ``AIOKAFKA_LITE_NO_EXTENSIONS`` is
unset; the pure-Python code in ``aiokafka_lite.records`` is the reference and stays complete.
"""
