"""`python -m attention`: the command line, one module an area (the toy computation, each model), over one
shared module of errors, the argument parser and the result table.
"""
