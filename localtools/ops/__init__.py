"""Operations: doctor (what this machine can run) and the child-process crash probe."""
