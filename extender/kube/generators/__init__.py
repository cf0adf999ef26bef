"""Generated artefacts: Kueue's CRDs and the fields page, from the one API description."""
