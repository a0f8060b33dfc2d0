"""Notebook side: magics, displays and widgets. Only the extension entry point imports it."""
