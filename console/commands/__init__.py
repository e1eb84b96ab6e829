"""One module per `episcope` verb (see console/cli.py for the contract)."""
