"""What people read: the terminal summary (and, later, the HTML report)."""
