"""What a bench writes from the stages' numbers: verdicts.py (every word said about a row of the bench, and the cell
rule), answer.py (the answer per technique), markdown.py (summary.md, and any mode's page), plots.py (the bench's
PNGs, and any mode's Figure), declared.py (what a mode declares it shows: its page's blocks, its plot's panels),
render.py (the one writer of a declaration: its page and plot in the results folder), diffs.py (the tutorial diffs),
report.py (report.html, from report.html.j2: the modes' pages in its folder too) and readme.py (the README's result
blocks). They read the summary's numbers, answers and causes (bench/stages), the words, and the declarations a mode
hands them; they never work a number out again, nor call a mode, nor name one's page: a mode's words and columns
are its own module's."""
