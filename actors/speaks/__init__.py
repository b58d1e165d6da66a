"""What a command's standard output speaks (docs/design.md, "Agent CLIs"; DESIGN §19):
plain lines, Zeus's own JSON lines, or an agent CLI's event stream, read into
progress, tool calls, spend, a session and a final text."""
