"""Image references and the OCI distribution client."""
