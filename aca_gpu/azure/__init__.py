"""The only package that imports azure.*: clients, resources, data plane, error translation."""
