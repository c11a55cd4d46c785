"""The C extension of aiokafka_lite_native (metadata in pyproject.toml)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "aiokafka_lite_native._v2",
            ["src/aiokafka_lite_native/_v2.c"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
