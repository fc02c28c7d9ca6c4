"""Operations: the command line, its commands and the demo."""
