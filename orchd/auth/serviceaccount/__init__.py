"""Service-account tokens: issued, verified, and the names they carry."""
