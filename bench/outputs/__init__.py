"""What a bench writes from the stages' numbers: verdicts.py (every word said about a row, and the cell rule),
answer.py (the answer per technique), markdown.py (summary.md), plots.py (the PNGs, the learning curves),
profiles.py (the --profile tables), diffs.py (the tutorial diffs), report.py (report.html, from report.html.j2) and
readme.py (the README's result blocks). They read numbers and words; they never call a stage or a mode."""
