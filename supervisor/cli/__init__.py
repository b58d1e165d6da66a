"""`zeus`, the command line: the entry point (main), one module per command (commands)
and the live tree (live). The library never imports this package."""
