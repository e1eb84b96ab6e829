"""The compiled part of episcope; everything else is declared in pyproject.toml.

The telemetry row decoder is optional: where it cannot be compiled the install still
succeeds and ingest reads telemetry with msgspec alone (the same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "console.formats._telemetry_rows",
            sources=["console/formats/_telemetry_rows.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
            optional=True,
        )
    ]
)
