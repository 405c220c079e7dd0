"""The local two-region stack and the AWS templates. Not part of the product's data path."""
