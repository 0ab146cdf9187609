"""Per study, its design changes made after a result of it was seen: history, kept apart from the design."""
