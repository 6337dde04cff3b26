"""simspec: calibrate once, simulate speculative decoding, train tree policies in minutes."""

__version__ = "0.1.0"
