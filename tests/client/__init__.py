"""Tests for orchd.client."""
