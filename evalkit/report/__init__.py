"""Reports of run dirs that a person looks at: `prime eval view` (terminal or one HTML file) and `prime eval tui`.

Reading is split from drawing. ``eval_data``, ``gepa_data`` and ``rl_data`` each turn one kind of run
dir into plain Python objects, reading every field defensively (files of older and newer versions,
killed runs, the anchors' schemas); ``plots`` turns those into inline SVG with matplotlib, ``html``
fills the jinja2 template, ``terminal`` prints text, ``tui`` is the Textual browser. Nothing here
imports the CLI or the trainer, and matplotlib, jinja2 and textual are imported only by the modules
that draw, so ``prime --help`` never loads them.
"""
