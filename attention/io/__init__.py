"""What goes in and out of the package: the command line (`cli/`), JSON and CSV exports, and the standalone
PyTorch script of a Config.
"""
