"""The http_pack domain pack (see ``pack.py``)."""
