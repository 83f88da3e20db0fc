"""TF1 Object Detection API SSD MobileNet v1 -> native TF2: convert, verify, benchmark."""

__version__ = "0.1.0"
