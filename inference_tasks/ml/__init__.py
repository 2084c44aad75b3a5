"""What training and the encodings share: the trainer's classifier heads and corpus pages in Redis (store.py),
the softmax head it fits (training.py), and the calibration corpus shipped with the package (corpus.py),
read by the quantized encodings' ranges and by the OpenVINO int8 export."""
