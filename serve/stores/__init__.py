"""Session and state stores behind :class:`pipelines.protocols.SessionStore`."""
