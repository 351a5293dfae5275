"""`prime serve`: the embedded engine as an OpenAI-compatible HTTP server.
"""
