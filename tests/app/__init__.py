"""Tests of components/ without a server: views, files and the tabs' handlers."""
