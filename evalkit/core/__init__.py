"""The bottom layer: errors, redaction, defaults, run dirs, file I/O, validated read-back,
untrusted data, TOML, asyncio helpers and the chat types. Imports nothing of primekit above it.
"""
