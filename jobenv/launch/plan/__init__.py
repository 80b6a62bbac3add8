"""Planning an attempt, before anything runs: the hosts and ranks (sizing), the launcher's line
from the recorded template (template, flags, launcher), the program's words (program), the
container around each rank (container), and the attempt's plan and environment (attempt).
Decisions are data; nothing here starts a process."""
