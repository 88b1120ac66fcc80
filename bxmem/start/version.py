"""bxmem's version: what `bxmem --version` prints and the User-Agent its HTTP requests carry."""

__version__ = "0.1.0"
