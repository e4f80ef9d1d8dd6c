"""The Open Inference Protocol (KServe v2): its REST wire and the models it serves."""
