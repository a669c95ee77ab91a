"""What the fleet and nodes pages show, built from what the fold keeps (a live store) or
from a trace's pods (a replay), and the process that builds the live ones for every web
process (``builder``). Below the web: the fold's side of Redis may build them too."""
