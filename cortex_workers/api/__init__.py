"""The HTTP API: thin routes over the domain; every error in one shape."""
