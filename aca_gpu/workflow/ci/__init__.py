"""acagpu in a repository's CI (`acagpu ci init`): the workflows it writes (`ci_init`), the wheel of the
running acagpu they install (`wheel`) and the dependency lock beside it (`lock`)."""
