document.title = "Home, loaded from the offline package";
