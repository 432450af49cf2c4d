"""cli/user_files: the user's arrays in and out: input .npy files, input shapes, seeded random
inputs, output files (written completely or not at all).

May import: cli's shared modules and every floor below cli.
"""
