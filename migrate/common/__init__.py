"""Helpers the commands share: atomic outputs, image files, drawing, label maps, the isolated
measurement worker and the console's quieting of TensorFlow."""
