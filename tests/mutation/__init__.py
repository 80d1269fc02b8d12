"""Mutation testing of the modules that carry Tandem's guarantees (``make mutation``)."""
