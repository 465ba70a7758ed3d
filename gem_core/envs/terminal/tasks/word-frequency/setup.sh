#!/bin/bash
# word-frequency: a short text with deliberate ties and punctuation.
set -eu
cat > speech.txt <<'TXT'
The river runs. The river RUNS to the sea, and the sea
does not fill; the river returns. Rivers, seas and rain:
rain falls, rain rises, and the river runs again.
Runs? Runs! Sea-side, sea-shore; "the end" -- the END.
TXT
