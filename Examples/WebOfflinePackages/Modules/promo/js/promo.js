console.log("promo");
