"""The airline domain pack (see ``pack.py``)."""
