"""Finding, installing, scaffolding and loading environments by id or folder.
"""
