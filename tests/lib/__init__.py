"""Tests of the library, s2d2/."""
