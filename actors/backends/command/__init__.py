"""Command agents (`command:`): child (`CommandChild`, a program watched by the process
backend's hub), io (its argv, output and outcome), reports (what its output says), and
work (the same program run by a worker, which holds its pipes)."""

from actors.backends.command.child import CommandChild

__all__ = ["CommandChild"]
