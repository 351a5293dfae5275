"""The rows, in a sibling module the environment imports by its bare name (as Hub environments do)."""

ROWS = [
    {"problem": "What is 2+3?", "answer": "5"},
    {"problem": "Compute 14+28.", "answer": "42"},
    {"problem": "What is 9+9?", "answer": "18"},
]
