"""What a bench writes from the stages' numbers: verdicts.py (every word said about a row, every mode's, and the
cell rule), answer.py (the answer per technique), markdown.py (summary.md and every mode's .md), plots.py (every
mode's PNGs), diffs.py (the tutorial diffs), report.py (report.html, from report.html.j2) and readme.py (the
README's result blocks). They read the summary's numbers, answers and causes (bench/stages) and the words; they
never work a number out again, nor call a mode."""
