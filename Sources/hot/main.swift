print("hot")
