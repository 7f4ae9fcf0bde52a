"""`dagflow report`: a run as one self-contained HTML page, and the DAG as a picture (SVG, PNG)."""
