"""Training SSD MobileNet v1 natively in TF2: the input pipeline that reads the Object Detection
API's TFRecords (`data`), its data augmentation (`augmentation`), a generated dataset that needs
no download (`shapes_dataset`), and the training objective and configuration beside them; each
module is imported by name, nothing is re-exported here."""
