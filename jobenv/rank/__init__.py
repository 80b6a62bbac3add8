"""What runs beside each rank: the wrapper's keeper (the program's parent, which records exactly
how it ended), the host agent, and the one reader of their ledger lines; standard library only,
since the keeper runs in an isolated Python (`python -I -S`)."""
